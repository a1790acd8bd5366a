compile tuple_elements.hlo --report json --explain -o /dev/null
