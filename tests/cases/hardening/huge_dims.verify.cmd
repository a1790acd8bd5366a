verify huge_dims.hlo
