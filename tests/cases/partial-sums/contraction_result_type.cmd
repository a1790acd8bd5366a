compile contraction_result_type.hlo --mesh 4
