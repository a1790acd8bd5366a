compile dynamic_slice.hlo --report text
