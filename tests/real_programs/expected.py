"""Hand-worked facts about the programs in this folder, one entry per file (name without `.py`).

Keys of each entry:
- "library": the library the program is written with ("flax.linen", "flax.nnx", "equinox",
  "keras", "jax", "pallas"). It is the library used, not what the tool's split reports: a plain
  function that uses Flax Linen or Equinox inside is still "flax.linen" / "equinox".
- "parameters": scalars in the learned parameters (sum of `.size`), worked from the architecture.
- "param_leaves": how many parameter arrays.
- "state" / "state_leaves" (only where there is some): scalars and arrays of the model's
  non-parameter variables (Linen `batch_stats`; Flax NNX RNG keys/counters and `Variable`s the
  call writes). Flax NNX splits them out with the parameters, so the split's array count is
  param_leaves + state_leaves; for a training step handed Flax NNX objects that split holds the
  optimizer's state and the metrics too, and they count here.
- "opt_state" / "opt_state_arg" (training steps with an optax state only): scalars in the
  optimizer state and its index in `example_inputs()`.
- "param_arg": index in `example_inputs()` of the argument that holds the parameters, for a plain
  function `model`; None where `model` is a module object (Flax NNX, Equinox, Keras), whose
  parameters the tool splits out as argument 0 itself (a Flax Linen module object: 0, its
  variables as the tool initializes them).
- "layers": the layer names the program defines, in call order, nested as the program's own
  modules nest (at most 3 levels; leaves are {}). Linen: root class name, then submodule names;
  NNX / Equinox: attribute names (an item of a list or dict: `layers[0]`, `blocks['attn']`);
  Keras: the `name=`s given; plain JAX: `jax.named_scope` names. A stacked/scanned layer appears
  once. An optax update is a layer named after the optimizer (its state's transformation:
  `adam`), holding each transformation of its chain by the optax function that made it.
- "outputs": what `model` returns.

All counts were checked against the real arrays (sum of `.size` over the pytree).
"""

EXPECTED = {
    "linen_resnet": {
        "library": "flax.linen",
        "parameters": (
            3 * 3 * 3 * 16            # conv_init kernel (no bias)
            + 16 * 2                  # bn_init scale + bias
            + 2 * (                   # ResNetBlock_0, ResNetBlock_1 (16 filters, no projection)
                3 * 3 * 16 * 16       #   Conv_0 kernel
                + 16 * 2              #   BatchNorm_0 scale + bias
                + 3 * 3 * 16 * 16     #   Conv_1 kernel
                + 16 * 2              #   BatchNorm_1 scale + bias
            )
            + 3 * 3 * 16 * 32         # ResNetBlock_2 Conv_0 kernel (stride 2)
            + 32 * 2                  #   BatchNorm_0
            + 3 * 3 * 32 * 32         #   Conv_1 kernel
            + 32 * 2                  #   BatchNorm_1
            + 1 * 1 * 16 * 32         #   shortcut_conv kernel
            + 32 * 2                  #   shortcut_bn
            + 32 * 10 + 10            # head kernel + bias
        ),  # = 24666
        "param_leaves": 1 + 2 + 2 * 6 + 9 + 2,  # = 26
        "state": (
            16 * 2                    # bn_init mean + var
            + 2 * 2 * 16 * 2          # ResNetBlock_0/1: two BatchNorms each, mean + var
            + 3 * 32 * 2              # ResNetBlock_2: BatchNorm_0, BatchNorm_1, shortcut_bn
        ),  # = 352 (batch_stats)
        "state_leaves": 2 + 2 * 4 + 6,  # = 16
        "param_arg": 0,  # the `variables` dict: {"params": ..., "batch_stats": ...}
        "layers": {
            "ResNet": {
                "conv_init": {},
                "bn_init": {},
                "ResNetBlock_0": {"Conv_0": {}, "BatchNorm_0": {}, "Conv_1": {}, "BatchNorm_1": {}},
                "ResNetBlock_1": {"Conv_0": {}, "BatchNorm_0": {}, "Conv_1": {}, "BatchNorm_1": {}},
                "ResNetBlock_2": {"Conv_0": {}, "BatchNorm_0": {}, "Conv_1": {}, "BatchNorm_1": {},
                                  "shortcut_conv": {}, "shortcut_bn": {}},
                "head": {},
            },
        },
        "outputs": "class logits, float32 (2, 10)",
    },
    "linen_transformer_lm": {
        "library": "flax.linen",
        "parameters": (
            64 * 32                   # token_embed embedding (vocab 64, emb 32)
            + 32 * 32                 # pos_embedding param (max_len 32, emb 32)
            + 2 * (                   # DecoderLayer_0, DecoderLayer_1
                32 * 2                #   LayerNorm_0 scale + bias
                + 3 * (32 * 4 * 8 + 4 * 8)  # MultiHeadDotProductAttention_0 query/key/value kernel + bias
                + 4 * 8 * 32 + 32     #   ... out kernel + bias
                + 32 * 2              #   LayerNorm_1
                + 32 * 64 + 64        #   MlpBlock_0 Dense_0
                + 64 * 32 + 32        #   MlpBlock_0 Dense_1
            )
            + 32 * 2                  # final_norm
            + 32 * 64 + 64            # logits kernel + bias
        ),  # = 22336
        "param_leaves": 1 + 1 + 2 * 16 + 2 + 2,  # = 38
        "param_arg": 0,
        "layers": {
            "TransformerLM": {
                "token_embed": {},
                "DecoderLayer_0": {"LayerNorm_0": {}, "MultiHeadDotProductAttention_0": {}, "LayerNorm_1": {},
                                   "MlpBlock_0": {}},
                "DecoderLayer_1": {"LayerNorm_0": {}, "MultiHeadDotProductAttention_0": {}, "LayerNorm_1": {},
                                   "MlpBlock_0": {}},
                "final_norm": {},
                "logits": {},
            },
        },
        "outputs": "next-token logits, float32 (2, 16, 64)",
    },
    "nnx_vae": {
        "library": "flax.nnx",
        "parameters": (
            64 * 32 + 32              # encoder.hidden kernel + bias
            + 32 * 8 + 8              # encoder.mean
            + 32 * 8 + 8              # encoder.logvar
            + 8 * 32 + 32             # decoder.hidden
            + 32 * 64 + 64            # decoder.out
        ),  # = 5008
        "param_leaves": 10,
        "state": 1 + 2 * 2,  # kl_loss (a scalar Variable), rngs.params key + count, rngs.noise key + count
        "state_leaves": 5,
        "param_arg": None,
        "layers": {
            "encoder": {"hidden": {}, "mean": {}, "logvar": {}},
            "decoder": {"hidden": {}, "out": {}},
        },
        "outputs": "reconstruction logits, float32 (4, 64); the call also updates kl_loss and the "
                   "noise stream's counter (rngs/noise/count)",
    },
    "nnx_scan_mlp": {
        "library": "flax.nnx",
        "parameters": (
            16 * 32 + 32              # embed kernel + bias
            + 3 * (                   # blocks, stacked on a leading axis of 3
                32 * 2                #   norm scale + bias
                + 32 * 32 + 32        #   linear kernel + bias
            )
            + 32 * 10 + 10            # head
        ),  # = 4234
        "param_leaves": 2 + 4 + 2,  # = 8 (the stacked block arrays count once each)
        "param_arg": None,
        "layers": {
            "embed": {},
            "blocks": {"norm": {}, "linear": {}},
            "head": {},
        },
        "outputs": "logits, float32 (4, 10)",
    },
    "equinox_gru": {
        "library": "equinox",
        "parameters": (
            3 * 16 * 4                # cell.weight_ih (3*hidden, input)
            + 3 * 16 * 16             # cell.weight_hh (3*hidden, hidden)
            + 3 * 16                  # cell.bias
            + 16                      # cell.bias_n
            + 3 * 16                  # linear.weight (classes, hidden), no bias
            + 3                       # bias field
        ),  # = 1075
        "param_leaves": 6,
        "opt_state": 2 * 1075 + 1,    # Adam mu + nu per parameter, and the step count
        "opt_state_arg": 1,
        "param_arg": 0,  # `model(params, opt_state, xs, ys)`; params = eqx.partition(net, ...)[0]
        "layers": {
            "cell": {},
            "linear": {},
            # optimizer.update(...): optax.adam is chain(scale_by_adam, scale_by_learning_rate), the
            # constant rate a `scale`; eqx.apply_updates is Equinox's, not optax's
            "adam": {"scale_by_adam": {}, "scale": {}},
        },
        "outputs": "(loss scalar, updated params (same pytree as argument 0), updated Adam state)",
    },
    "keras_vit": {
        "library": "keras",
        "parameters": (
            8 * 8 * 3 * 32 + 32       # patch_conv kernel + bias
            + 16 * 32                 # patch_encoder position_embedding (16 patches x 32)
            + 2 * (                   # block0_*, block1_*
                32 * 2                #   norm1 gamma + beta
                + 3 * (32 * 4 * 8 + 4 * 8)  # attn query/key/value kernel + bias
                + 4 * 8 * 32 + 32     #   attn output kernel + bias
                + 32 * 2              #   norm2
                + 32 * 64 + 64        #   mlp1
                + 64 * 32 + 32        #   mlp2
            )
            + 32 * 2                  # final_norm
            + 32 * 10 + 10            # classifier
        ),  # = 24170 (all trainable; no non-trainable variables)
        "param_leaves": 2 + 1 + 2 * 16 + 2 + 2,  # = 39
        "param_arg": None,
        "layers": {
            "patch_conv": {},
            "patch_flatten": {},
            "patch_encoder": {},
            "block0_norm1": {}, "block0_attn": {}, "block0_add1": {},
            "block0_norm2": {}, "block0_mlp1": {}, "block0_mlp2": {}, "block0_add2": {},
            "block1_norm1": {}, "block1_attn": {}, "block1_add1": {},
            "block1_norm2": {}, "block1_mlp1": {}, "block1_mlp2": {}, "block1_add2": {},
            "final_norm": {},
            "pool": {},
            "classifier": {},
        },
        "outputs": "class logits, float32 (2, 10)",
    },
    "dpsgd": {
        "library": "jax",
        "parameters": (
            16 * 32 + 32              # dense1 w + b
            + 32 * 32 + 32            # dense2 w + b
            + 32 * 4 + 4              # logits w + b
        ),  # = 1732
        "param_leaves": 6,
        "param_arg": 0,  # a list of {"w", "b"} dicts; argument 3 is a raw uint32[2] PRNG key
        "layers": {
            "dense1": {},
            "dense2": {},
            "logits": {},
            "clip": {},
            "noise": {},
            "sgd_update": {},
        },
        "outputs": "updated parameters, same pytree as argument 0",
    },
    "pallas_matmul": {
        "library": "pallas",
        "parameters": (
            64 * 32 + 32              # dense1 w1 + b1
            + 32 * 16 + 16            # dense2 w2 + b2
        ),  # = 2608
        "param_leaves": 4,
        "param_arg": 0,
        "layers": {
            "dense1": {},
            "dense2": {},
        },
        "outputs": "activations after the second layer, float32 (32, 16)",
    },
    "custom_vjp": {
        "library": "jax",
        "parameters": (
            16 * 32 + 32              # dense1 w1 + b1
            + 32 * 1 + 1              # dense2 w2 + b2
        ),  # = 577
        "param_leaves": 4,
        "param_arg": 0,
        "layers": {
            "dense1": {},
            "dense2": {},
            "logistic_loss": {},
        },
        "outputs": "(loss scalar, gradients with the parameters' pytree)",
    },
    "checkpoint_policy": {
        "library": "jax",
        "parameters": (
            16 * 32 + 32              # embed w + b
            + 3 * (                   # block_0 .. block_2
                32 * 64 + 64          #   fc_in
                + 64 * 32 + 32        #   fc_out
            )
            + 32 * 8 + 8              # head
        ),  # = 13384
        "param_leaves": 2 + 3 * 4 + 2,  # = 16
        "param_arg": 0,
        "layers": {
            "embed": {},
            "block_0": {},
            "block_1": {},
            "block_2": {},
            "head": {},
        },
        "outputs": "(loss scalar, SGD-updated parameters with argument 0's pytree)",
    },
    "lax_scan_rnn": {
        "library": "jax",
        "parameters": (
            8 * 32 + 32               # input_proj w + b
            + 32 * 32                 # rnn w_hh
            + 32 * 4 + 4              # readout w + b
        ),  # = 1444
        "param_leaves": 5,
        "param_arg": 0,
        "layers": {
            "input_proj": {},
            "rnn": {"cell": {}},
            "readout": {},
        },
        "outputs": "per-step class scores, float32 (2, 16, 4)",
    },
    "nnx_train_step": {
        "library": "flax.nnx",
        "parameters": (
            3 * 3 * 1 * 8 + 8         # conv kernel + bias
            + 8 * 2                   # bn scale + bias
            + 8 * 7 * 7 * 10 + 10     # head kernel + bias (7x7x8 pooled features)
        ),  # = 4026
        "param_leaves": 6,
        "state": (
            8 * 2                     # bn mean + var
            + 1 + 1                   # the dropout stream's key and count
            + 1 + 1 + 2 * 4026        # the optimizer's step; adam's count, mu and nu
            + 2 * 2                   # accuracy and loss: a total and a count each
        ),  # = 8076
        "state_leaves": 2 + 2 + (1 + 1 + 2 * 6) + 4,  # = 22
        "param_arg": None,
        "layers": {
            "conv": {},
            "bn": {},
            "dropout": {},
            "head": {},
            # optimizer.update(model, grads): optax.adamw is chain(scale_by_adam, add_decayed_weights,
            # scale_by_learning_rate), then optax.apply_updates, all inside nnx.Optimizer.update
            "adam": {"scale_by_adam": {}, "add_decayed_weights": {}, "scale": {}, "apply_updates": {}},
        },
        "outputs": "nothing of its own: the new parameters, adam's count and moments, the optimizer's step, "
                   "the BatchNorm statistics, the dropout stream's count and the metrics' totals",
    },
    "linen_object": {
        "library": "flax.linen",
        "parameters": (
            10 * 24 + 24              # embed kernel + bias
            + 24 * 2                  # norm scale + bias
            + 24 * 6 + 6              # logits kernel + bias
        ),  # = 462
        "param_leaves": 6,
        "state": 24 * 2,              # batch_stats: norm mean + var
        "state_leaves": 2,
        "param_arg": 0,  # the variables {"params", "batch_stats"}; the dropout stream's key is argument 1
        "layers": {
            "Classifier": {"embed": {}, "norm": {}, "drop": {}, "logits": {}},
        },
        "outputs": "class logits, float32 (8, 6), and the new batch_stats",
    },
    "nnx_decoder": {
        "library": "flax.nnx",
        "parameters": (
            48 * 32                   # embed embedding (vocab 48, dim 32)
            + 12 * 32                 # positions (SEQ 12 x dim 32), a Param of the decoder itself
            + 2 * (                   # layers[0], layers[1]
                32                    #   attn_norm scale
                + 32 * 96             #   attn.qkv kernel (no bias)
                + 32 * 32             #   attn.out kernel (no bias)
                + 32                  #   mlp_norm scale
                + 3 * 32 * 64         #   mlp.gate, mlp.up (32 -> 64), mlp.down (64 -> 32), no bias
            )
            + 32                      # final_norm scale
            + 32 * 48 + 48            # logits kernel + bias
        ),  # = 24144
        "param_leaves": 1 + 1 + 2 * 7 + 1 + 2,  # = 19
        "param_arg": None,
        "layers": {
            "embed": {},
            "layers[0]": {"attn_norm": {}, "attn": {"qkv": {}, "out": {}}, "mlp_norm": {},
                          "mlp": {"gate": {}, "up": {}, "down": {}}},
            "layers[1]": {"attn_norm": {}, "attn": {"qkv": {}, "out": {}}, "mlp_norm": {},
                          "mlp": {"gate": {}, "up": {}, "down": {}}},
            "final_norm": {},
            "logits": {},
        },
        "outputs": "next-token logits, float32 (2, 12, 48)",
    },
    "optax_chain_step": {
        "library": "flax.linen",
        "parameters": (
            16 * 32 + 32              # hidden kernel + bias
            + 32 * 4 + 4              # out kernel + bias
        ),  # = 676
        "param_leaves": 4,
        "opt_state": 1 + 2 * 676,     # clip_by_global_norm and scale hold nothing; adam: count, mu, nu
        "opt_state_arg": 1,
        "param_arg": 0,  # the params dict; `model(params, opt_state, x, y)`
        "layers": {
            "MLP": {"hidden": {}, "out": {}},
            # tx.update(...): the chain is named by its state's transformation (adam); inside it
            # each transformation by the optax function that made it (adam's constant rate: scale)
            "adam": {"clip_by_global_norm": {}, "scale_by_adam": {}, "scale": {}},
            "apply_updates": {},
        },
        "outputs": "(loss scalar, updated parameters with argument 0's pytree, the chain's new state)",
    },
    "bfgs_fit": {
        "library": "jax",
        "parameters": 6 + 1,          # w0: FEATURES weights + a bias, the point BFGS starts from
        "param_leaves": 1,
        "param_arg": 0,
        "layers": {},                 # no named scopes: the fit is two nested while_loops
        "outputs": "(fitted weights float32 (7,), final loss scalar, iterations int32 scalar)",
    },
    "ode_adaptive": {
        "library": "jax",
        "parameters": 3,              # gravity, stiffness, damping: one scalar each
        "param_leaves": 3,
        "param_arg": 0,
        "layers": {},                 # no named scopes: one while_loop with a lax.cond inside
        "outputs": "(state at T_END float32 (4,), steps taken int32 scalar, steps rejected int32 scalar)",
    },
    "pmap_sgd": {
        "library": "jax",
        "parameters": (
            12 * 24 + 24              # hidden w + b
            + 24 * 3 + 3              # out w + b
        ),  # = 387
        "param_leaves": 4,
        "param_arg": 0,
        "layers": {"hidden": {}, "out": {}},
        "outputs": "(updated parameters, one copy per device: leading axis 4; mean loss float32 (4,))",
    },
}
