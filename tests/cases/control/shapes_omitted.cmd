compile shapes_omitted.hlo --mesh 4
