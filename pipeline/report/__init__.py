"""The report: a results directory read into summed tables, figures, the claims' verdicts,
the document and its renderings, and plots. Imports the store, the records, the inference
layer and the engine, never the sweep."""
