verify halo.hlo
