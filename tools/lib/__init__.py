"""What every tools/ folder shares (README.md: a line each). A script in tools/FOLDER/ puts
tools/ on sys.path and imports by folder, from any working directory:

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/
    from lib import ROOT, outputs
    from reference import reference
"""
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository
