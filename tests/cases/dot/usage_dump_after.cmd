compile ../../../examples/mlp.hlo --dot - --dump-after propagate
