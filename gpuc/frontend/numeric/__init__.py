"""Numbers: operators and their promotion (arithmetic.py), complex numbers (complex.py, complex_math.py),
the small dtypes and the math library: what typing and lowering use for every operator. Built on
the core only."""
