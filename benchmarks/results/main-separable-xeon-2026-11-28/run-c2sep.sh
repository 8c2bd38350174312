#!/bin/bash
# The native hour (bf16 + compile) with two separable convolution sublayers a layer in encoder layers 0-1
cd /work/main && CSAN_DATA=../shared/data .venv/bin/csan train --config multi30k-small \
  --set model.attention_options.cnn.conv_layers=2 --set model.attention_options.cnn.separable=true --out "$1"
