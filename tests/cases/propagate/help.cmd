propagate --help
