# tests owned by the matcher work
