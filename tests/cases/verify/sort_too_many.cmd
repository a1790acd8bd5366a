verify sort_too_many.hlo
