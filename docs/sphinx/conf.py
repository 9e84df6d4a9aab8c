# Sphinx configuration of the collection's documentation site (built by docs/sphinx/build.sh).
# No network: intersphinx is off, so references to other collections' docs stay plain text.

project = 'inferops.vllm_dr'
copyright = 'inferops SRE'  # pylint: disable=redefined-builtin

title = 'inferops.vllm_dr: vLLM disaster recovery'
html_short_title = 'inferops.vllm_dr'
html_title = 'inferops.vllm_dr documentation'

# myst_parser: the guides kept as Markdown in docs/ (docs/runbook.md, docs/aap.md) are pages of the site as they are
extensions = ['sphinx_antsibull_ext', 'myst_parser']
source_suffix = {'.rst': 'restructuredtext', '.md': 'markdown'}
# `[text](runbook.md#backups-you-can-always-restore)` links a heading of another guide, as GitHub renders it
myst_heading_anchors = 3

pygments_style = 'ansible'
highlight_language = 'YAML+Jinja'

html_theme = 'sphinx_ansible_theme'
html_show_sphinx = False
html_theme_options = {
    'collapse_navigation': False,
    'analytics_id': '',
    'style_nav_header_background': '#5bbdbf',
    'style_external_links': True,
    'vcs_pageview_mode': 'edit',
    'navigation_depth': 3,
    # the logo's link: set per page by _link_logo_to_root below (the theme writes this value as it is)
    'documentation_home_url': 'index.html',
    'show_rtd_ethical_ads': False,
}
display_version = False

html_use_smartypants = True
html_use_modindex = False
html_use_index = False
html_copy_source = False

default_role = 'any'
nitpicky = True


def _link_logo_to_root(app, pagename, templatename, context, doctree):  # pylint: disable=unused-argument
    """The theme writes documentation_home_url into every page as it is, so a relative 'index.html' pointed the logo
    of a page in a subdirectory at a page that does not exist there: give each page the path to the root page."""
    context['theme_documentation_home_url'] = context['pathto'](app.config.root_doc)


def setup(app):
    app.connect('html-page-context', _link_logo_to_root)
