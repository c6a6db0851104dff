"""Reading, writing and validating report files: kept at this path for plugins and tests
written before the report room; the code lives in ``perfstack.report.files``."""

from perfstack.report.files import (
    check_report_data,
    finite,
    load_report,
    migrate,
    read_json,
    read_report_data,
    save_report,
    schema,
    schema_errors,
    write_atomic,
    write_json_atomic,
    write_text_atomic,
)

__all__ = ["check_report_data", "finite", "load_report", "migrate", "read_json",
           "read_report_data", "save_report", "schema", "schema_errors", "write_atomic",
           "write_json_atomic", "write_text_atomic"]
