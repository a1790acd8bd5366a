verify shapes_omitted.hlo --mesh 4
