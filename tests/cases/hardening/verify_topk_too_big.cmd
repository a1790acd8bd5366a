verify verify_topk_too_big.hlo --mesh 4
