verify dot_mixed_types.hlo --mesh 2
