"""Pure numpy/pandas engine behind the dashboard: schedules, simulator, memory, planner.

Nothing here imports streamlit or plotly; pages and the CLI call the same functions.
"""
