"""The Streamlit app of `attribution dashboard` (app.py, pages/). Shipped inside the package as
attribution/dashboards; it is a front end, not part of the library: only this folder imports streamlit."""
