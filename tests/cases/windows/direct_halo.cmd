compile direct_halo.hlo -o /dev/null
