"""statectl command line: thin click commands over statecore and formats, rich and JSON output."""
