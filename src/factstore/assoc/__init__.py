"""The linear associative memory (S1): the problem, its Hebbian and trained W, and the readings
the S1 claims are checked against.

memory: sampling problems, recall, Hebbian and trained W, spectra and their laws;
perfect_storage: the fraction of seeds storing every fact per load, and the loads the rank check
retrains. The summary's readings, tables in and metric rows out, one claim family each: capacity
(the capacity table and the grid spacing), optimal_capacity, hebbian_capacity, decoupled_gaps,
rank_capacity and spectrum_metrics.
"""
