verify names_collide.hlo
