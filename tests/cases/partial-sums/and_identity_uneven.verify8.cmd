verify and_identity_uneven.hlo --mesh 8
