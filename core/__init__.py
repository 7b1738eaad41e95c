"""Pure numpy/pandas engine behind the dashboard, grouped by domain; nothing here imports streamlit or plotly.

Imports run one way (tests/test_architecture.py checks it):

    params -> model | frameworks -> pipeline | memory -> cost -> planner -> configs -> views -> cli

The top level holds only what every package shares: errors, units, input validation, the process runtime.
"""
