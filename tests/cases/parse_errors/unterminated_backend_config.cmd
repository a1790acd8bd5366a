compile unterminated_backend_config.hlo -o out.hlo
