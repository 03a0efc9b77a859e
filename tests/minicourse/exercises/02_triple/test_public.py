# (no public checks for this exercise)
