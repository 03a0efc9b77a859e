"""The synthetic class `grade compare`'s tests and bench run on (see ``build``)."""
