verify unsupported_c64.hlo --mesh 2
