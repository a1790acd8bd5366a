compile tuple_elements.hlo --explain -o /dev/null
