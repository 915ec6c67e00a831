// The protocol core lands here.
