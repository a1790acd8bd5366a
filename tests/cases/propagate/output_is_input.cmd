propagate reshape.hlo -o ./reshape.hlo
