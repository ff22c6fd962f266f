"""Arrays: views and their copies, pairwise sums, array methods (a.sum(), ...) and global NumPy arrays.
Built on the core and numbers."""
