"""ui.controls.arrival_params: which query string a page gets when the reader navigates to it (issue 24)."""

from ui.controls import arrival_params

SAVED = {"preset": ["starvation"], "max_num_seqs": ["3"], "present": ["1"]}


def test_a_page_link_without_settings_gets_the_pages_own_back():
    assert arrival_params({}, SAVED, {}) == {"preset": ["starvation"], "max_num_seqs": ["3"]}


def test_session_settings_come_from_the_page_just_left_not_the_saved_url():
    assert arrival_params({}, SAVED, {"present": ["1"], "export": ["svg"]}) == {
        "preset": ["starvation"], "max_num_seqs": ["3"], "present": ["1"], "export": ["svg"]}
    # presentation mode turned off elsewhere stays off here, though this page's URL had it on
    assert "present" not in arrival_params({}, SAVED, {"seed": ["4"]})


def test_a_link_with_settings_of_its_own_is_taken_as_it_is():
    got = arrival_params({"preset": ["sizing"]}, SAVED, {"present": ["1"]})
    assert got == {"preset": ["sizing"], "present": ["1"]}
    assert arrival_params({"present": ["0"]}, {}, {"present": ["1"]}) == {"present": ["0"]}


def test_a_first_visit_gets_only_the_session_settings():
    assert arrival_params({}, {}, {"present": ["1"], "step": ["40"]}) == {"present": ["1"]}
