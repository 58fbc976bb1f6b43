# tests owned by the vocab work
