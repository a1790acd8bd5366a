compile mlir_text.hlo -o out.hlo
