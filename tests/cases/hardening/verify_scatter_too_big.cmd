verify verify_scatter_too_big.hlo --mesh 4
