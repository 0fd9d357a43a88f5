"""The dashboard's pages, one flat script each (widgets, guard clause, one library call, one chart); app.py
lists them in the navigation."""
