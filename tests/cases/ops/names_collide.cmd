compile names_collide.hlo --report json
