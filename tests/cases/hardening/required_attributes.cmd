compile required_attributes.hlo -o out.hlo
