compile soft_keywords.hlo --mesh 2
