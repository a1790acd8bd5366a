verify divergent_while.hlo --program divergent_while.program.hlo --mesh 4
