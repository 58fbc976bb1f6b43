# tests owned by the decoder work
