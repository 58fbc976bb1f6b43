# tests owned by the regex work
