propagate reshape.hlo user_control.hlo
