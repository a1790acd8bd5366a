verify verify_topk_op_too_big.hlo --mesh 4
