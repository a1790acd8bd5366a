propagate user_control.hlo --explain
