compile and_identity_uneven.hlo --mesh 4
