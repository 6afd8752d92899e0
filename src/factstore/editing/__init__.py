"""Language modelling with a fact-storing MLP expert, and fact editing (S0 "Language modelling and fact editing")."""
